from datetime import date, timedelta


def count_weekdays(start, end):
    day, last = date.fromisoformat(start), date.fromisoformat(end)
    count = 0
    while day <= last:
        if day.weekday() < 5:
            count += 1
        day += timedelta(days=1)
    return count


if __name__ == "__main__":
    print(count_weekdays("2024-03-01", "2024-03-31"))
