def luhn_valid(number):
    digits = number.replace(" ", "")
    if len(digits) < 2 or not all("0" <= c <= "9" for c in digits):
        return False
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0
