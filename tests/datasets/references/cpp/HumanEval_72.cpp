    long sum = std::accumulate(q.begin(), q.end(), 0L);
    return sum <= w && std::equal(q.begin(), q.end(), q.rbegin());
}
