"""Word labels beside the points of a scatter plot, placed so that none covers another."""

# Where a label may sit, in points from its dot: right and above first, then the rest.
OFFSETS = [(4, 3), (4, -10), (-4, 3), (-4, -10), (0, 8), (0, -16), (8, -4), (-8, -4)]


def label_points(ax, xy, words, *, fontsize: float = 9) -> list:
    """Annotate each point (x, y) of `xy` (in data coordinates) with its word. Each label
    takes the first place of OFFSETS where it stays inside the figure (not cut at its edge)
    and covers no label placed before it and no dot (else the place that does least harm:
    cut at the edge counts most, then a label covered, then a dot). Call it once the axes
    are laid out (after tight_layout), since the places are measured on the figure as drawn.
    Returns the labels."""
    xy = [tuple(map(float, p)) for p in xy]
    if len(xy) != len(words):
        raise ValueError(f"xy has {len(xy)} points and words {len(words)} words: one word "
                         "per point expected")
    renderer = ax.figure.canvas.get_renderer()
    frame = ax.figure.bbox
    dots = [ax.transData.transform(p) for p in xy]
    placed, labels = [], []
    for point, word in zip(xy, words, strict=True):
        best = None
        for dx, dy in OFFSETS:
            text = ax.annotate(word, point, xytext=(dx, dy), textcoords="offset points",
                               fontsize=fontsize, ha="left" if dx >= 0 else "right")
            box = text.get_window_extent(renderer)
            outside = not (frame.x0 <= box.x0 and box.x1 <= frame.x1
                           and frame.y0 <= box.y0 and box.y1 <= frame.y1)
            covered = 1000 * outside + 10 * sum(box.overlaps(other) for other in placed) + sum(
                box.contains(*dot) for dot in dots)
            if best is None or covered < best[0]:
                if best is not None:
                    best[1].remove()
                best = (covered, text, box)
            else:
                text.remove()
            if covered == 0:
                break
        placed.append(best[2])
        labels.append(best[1])
    return labels
