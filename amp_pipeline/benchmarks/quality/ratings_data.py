"""A synthetic ratings CSV with a known structure, for benchmarks/RESULTS.md ("Recommenders"):

    python -m amp_pipeline.benchmarks.quality.ratings_data ratings.csv 20000

`userId`, `movieId`, `rating`: 300 users and 400 movies; a rating is 3.5 plus a user bias, a
movie bias (sd 0.5 each), the dot product of 4-factor user and movie vectors (sd 0.6 each) and
noise (sd 0.3), rounded to halves in 0.5-5. Seeded: the same file every time.
"""

from __future__ import annotations

import csv
import sys

import numpy as np


def write(path: str, rows: int, users: int = 300, movies: int = 400, factors: int = 4) -> None:
    rng = np.random.default_rng(0)
    user_vec = rng.normal(0, 0.6, (users, factors))
    movie_vec = rng.normal(0, 0.6, (movies, factors))
    user_bias, movie_bias = rng.normal(0, 0.5, users), rng.normal(0, 0.5, movies)
    with open(path, "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(["userId", "movieId", "rating"])
        for _ in range(rows):
            u, m = rng.integers(users), rng.integers(movies)
            r = 3.5 + user_bias[u] + movie_bias[m] + user_vec[u] @ movie_vec[m]
            r += rng.normal(0, 0.3)
            out.writerow([u + 1, m + 1, float(np.clip(np.round(r * 2) / 2, 0.5, 5.0))])


if __name__ == "__main__":
    write(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20_000)
