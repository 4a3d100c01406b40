"""halluflow's shipped resources, importable as `halluflow._resources` once installed (setup.py maps this folder into
the package); read them through `halluflow.resources.resource_path`, never by a path into a checkout."""
