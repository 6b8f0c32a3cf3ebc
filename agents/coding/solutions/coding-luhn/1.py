def luhn_valid(number):
    digits = number.replace(" ", "")
    if len(digits) < 2 or not digits.isdigit() or not digits.isascii():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


if __name__ == "__main__":
    print(luhn_valid("4539 3195 0343 6467"))
