"""halluflow's config schema, importable as `halluflow._schemas` once installed (setup.py maps this folder into the
package); read it through `halluflow.resources.schema_path`, never by a path into a checkout."""
