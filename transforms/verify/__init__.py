"""Checking a written dataset against its manifest: files, records, examples, media."""
