"""A run on disk: what a training run, a sweep or a warm start keeps and resumes from, beneath the commands.

* ``run_dir``: the run directory (config, metrics log, checkpoints) and the resumable loop every trainer runs in
  (``ResumableTraining``: resume, save, budget, progress bar); ``run_lock``: one writer per run directory;
  ``stopping``: a stop signal (SIGTERM, SIGINT) ends an iteration cleanly and saves;
* ``train_boxeszero`` and ``train_td``: BoxesZero / AlphaZero and TD(lambda) runs in that loop;
* ``training_labels``: which exact labels training may use (the measuring set's positions left out);
  ``warm_start``: a network fitted to exact labels (``dabjax pretrain``), saved as an agent folder;
* ``label_build``: a labelled set built chunk by chunk in a work directory (``dabjax label build``), resumable;
* ``sweep_dir``: a sweep directory's record and its trials' statuses;
* ``run_summary``: the closing summary of a run (its last evaluation, the commands that go on from it).

The commands (``dabjax.cli``) parse arguments, print and serve over these; nothing here parses a command line.
"""
