"""Training: the typed configuration, backward self-play, the replay buffer, the start-step curriculum, the
learner, one training iteration (``trainer``), orbax checkpoints and the device mesh."""
