"""Cloud Bigtable: the table's rows read in key ranges, and tables written."""
