"""The stacked-MLP engine: the MNIST, Twitter POS and TIMIT networks, an ensemble per job."""
