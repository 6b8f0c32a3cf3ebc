import re
from collections import Counter


def top_words(text, k):
    return Counter(re.findall(r"[a-z']+", text.lower())).most_common(k)


if __name__ == "__main__":
    print(top_words("the cat and the hat and the bat", 2))
