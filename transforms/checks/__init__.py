"""Job-wide checks, each a light pass or a shuffle of small records: stratified
splits, leakage between splits, duplicates and near duplicates."""
