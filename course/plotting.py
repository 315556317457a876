"""One look for every figure of the book: colour-blind-safe colours, and never colour alone.

    from course.plotting import use_course_style, COLORS, MARKERS, LINESTYLES
    use_course_style()

The palette is Okabe and Ito's (Color Universal Design, 2002), safe for the common colour-vision
deficiencies. The default cycle pairs each colour with its own line style and marker, so lines stay
distinguishable in grey scale; bars and scatters should add MARKERS, hatches or direct labels too.
Every figure also needs alt text: give its code cell `mystnb: {image: {alt: ...}, figure: {caption: ...}}`.
"""

from __future__ import annotations

from cycler import cycler

# Okabe-Ito: blue, vermillion, bluish green, orange, reddish purple, sky blue, yellow, black.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1)), (0, (5, 5)))
# The sequential colour map that reads in grey scale and for colour-blind readers.
SEQUENTIAL_CMAP = "viridis"


def use_course_style() -> None:
    """Set matplotlib's defaults for the book: the palette, a paired line-style and marker cycle, viridis."""
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "figure.dpi": 110,
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": cycler(color=COLORS) + cycler(linestyle=LINESTYLES) + cycler(marker=MARKERS),
        "lines.markersize": 5,
        "image.cmap": SEQUENTIAL_CMAP,
    })
