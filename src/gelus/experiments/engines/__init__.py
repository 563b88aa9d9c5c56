"""The engines, one package each: its config, its trainer and its models together."""
