from datetime import date


def days_between(a, b):
    return abs((date.fromisoformat(a) - date.fromisoformat(b)).days)


if __name__ == "__main__":
    print(days_between("2024-01-01", "2024-03-01"))
