import re
from collections import Counter


def top_words(text, k):
    counts = Counter(re.findall(r"[a-z']+", text.lower()))
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:k]


if __name__ == "__main__":
    print(top_words("the cat and the hat and the bat", 2))
