"""Exceptions with messages meant for users: each names the offending key, file or item."""


class HalluflowError(Exception):
    """Base class: the CLI prints these as one line and exits non-zero."""


class ConfigError(HalluflowError):
    """The config does not match the schema; the message names the key."""


class InputError(HalluflowError):
    """A user-supplied file (annotations, answers, images) is missing or malformed."""


class MissingExtraError(HalluflowError, ImportError):
    """An optional dependency is missing; the message names the pip extra to install."""


class BackendError(HalluflowError):
    """A model backend failed in a way a retry will not fix."""


class TooManyFailedError(HalluflowError):
    """More answers failed than the user's --max-failed-fraction allows: no numbers are printed."""
