"""A picture of a written dataset: what it holds, gathered (gather.py) and drawn (figure.py)."""
