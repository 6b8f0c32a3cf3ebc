import datetime


def count_weekdays(start, end):
    a, b = datetime.date.fromisoformat(start), datetime.date.fromisoformat(end)
    if b < a:
        return 0
    days = (b - a).days + 1
    weeks, rest = divmod(days, 7)
    first = a.weekday()
    return weeks * 5 + sum(1 for i in range(rest) if (first + i) % 7 < 5)
