"""The built-in solver-labelled position sets (``*.npz``): the package ``dabjax.data`` once installed, named by file
stem (``eval.labelled_set: 5x5``; ``dabjax.package_data``). A package only so that ``importlib.resources`` finds
these files in an editable install too."""
