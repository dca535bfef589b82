"""Made-up data for the demo, the tests and the benchmarks: synthetic speakers'
audio and video encoded with real codecs (`synthetic_media`), and corpora of
them in tar shards or CSV listings (`corpus`). Not used by any job."""
