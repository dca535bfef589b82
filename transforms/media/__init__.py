"""Decoding and cutting media (Beam-free): audio, video, windows, the cut into examples."""
