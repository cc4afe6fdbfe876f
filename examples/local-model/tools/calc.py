"""A Tool entry: `handlers` maps each export name to handler(ctx, input)."""


def add(ctx, args):
    return {"sum": args["a"] + args["b"]}


handlers = {"add": add}
