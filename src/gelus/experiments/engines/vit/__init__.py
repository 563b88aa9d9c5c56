"""The ViT engine: transformer-vit, the language model's blocks over image patches."""
