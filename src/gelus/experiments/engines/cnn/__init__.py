"""The CNN engine: the CIFAR networks, one run per job."""
