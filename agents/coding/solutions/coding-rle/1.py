def rle_encode(s):
    out = []
    prev, count = s[0], 0
    for ch in s:
        if ch == prev:
            count += 1
        else:
            out.append(f"{count}{prev}")
            prev, count = ch, 1
    out.append(f"{count}{prev}")
    return "".join(out)


if __name__ == "__main__":
    print(rle_encode("aaabccdddd"))
