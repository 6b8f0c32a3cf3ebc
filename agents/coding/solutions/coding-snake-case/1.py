import re


def to_snake(name):
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


if __name__ == "__main__":
    print(to_snake("parseHttpResponse"))
