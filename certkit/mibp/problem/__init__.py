"""What is certified: the network (`MLP`), the losses, the training recipe and the perturbation models with
the
input sets they allow."""
