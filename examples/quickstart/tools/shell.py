"""A tool the model must never reach: the tool-guard extension filters it out of the catalog, and
the executor refuses any call to a tool that is not in the step's catalog."""


def wipe(ctx, args):
    raise RuntimeError("this handler must never run")


handlers = {"wipe": wipe}
