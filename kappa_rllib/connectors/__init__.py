"""RLlib connector pieces that put kappa into RLlib's own algorithms."""
