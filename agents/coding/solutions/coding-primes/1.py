def primes_up_to(n):
    sieve = [True] * n
    primes = []
    for p in range(2, n):
        if sieve[p]:
            primes.append(p)
            for q in range(p * p, n, p):
                sieve[q] = False
    return primes


if __name__ == "__main__":
    print(primes_up_to(20))
