import itertools


def rle_encode(s):
    return "".join("%d%s" % (len(list(run)), ch) for ch, run in itertools.groupby(s))
