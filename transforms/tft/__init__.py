"""tf.Transform: preprocessing fitted on the train split and applied to every example."""
