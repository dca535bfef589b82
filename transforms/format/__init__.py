"""What training code imports (Beam-free): samples, the feature spec, the tf.Example
encoder, the manifest (dataset info), dead letters, the tf.data reader."""
