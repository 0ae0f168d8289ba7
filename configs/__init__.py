"""The built-in configs (``*.yaml``) and sweeps (``sweeps/*.yaml``): the package ``dabjax.configs`` once installed,
named by file stem (``dabjax train --config 5x5_cpu``; ``dabjax.package_data``). A package only so that
``importlib.resources`` finds these files in an editable install too."""
