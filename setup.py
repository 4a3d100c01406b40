"""Which packages the halluflow wheel holds (everything else is in pyproject.toml): the library under src/ plus the
repository's top-level resources/ and schemas/ folders, mapped into it as halluflow._resources and halluflow._schemas
(`package-dir` in pyproject.toml), so an installed halluflow reads them with importlib.resources and needs no checkout
beside it, and an editable install (`pip install -e .`) reads the checkout's folders themselves. resources/models is
a local build cache of stand-in models, never shipped. pyproject.toml cannot list packages found under src/ and
mapped ones together, hence this file."""

from setuptools import find_namespace_packages, setup

MAPPED = {"halluflow._resources": "resources", "halluflow._schemas": "schemas"}
NOT_PACKAGES = ["*__pycache__*", "models", "models.*"]

packages = find_namespace_packages("src", include=["halluflow", "halluflow.*"], exclude=NOT_PACKAGES)
for package, folder in MAPPED.items():
    # data sub-folders listed as (namespace) packages, as `packages.find` would: their files are package data
    packages += [package, *(f"{package}.{sub}" for sub in find_namespace_packages(folder, exclude=NOT_PACKAGES))]

setup(packages=packages)
