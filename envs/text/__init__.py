"""Text environments (family ``text``): natively ``str`` observations and actions."""
