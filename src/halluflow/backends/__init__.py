"""Model backends, one abstract base per role (see base.py); concrete classes are registered in registry.py."""
