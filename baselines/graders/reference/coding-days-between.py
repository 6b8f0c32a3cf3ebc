import datetime


def days_between(a, b):
    return abs((datetime.date.fromisoformat(b) - datetime.date.fromisoformat(a)).days)
