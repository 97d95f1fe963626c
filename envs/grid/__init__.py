"""Grid-world environments (family ``grid``): symbolic tensor observations, discrete actions."""
