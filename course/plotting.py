"""One look for every figure of the book: colour-blind-safe colours, never colour alone, and text
that stays readable on a phone and on a desktop.

    from course.plotting import use_course_style, COLORS, MARKERS, LINESTYLES
    use_course_style()

The palette is Okabe and Ito's (Color Universal Design, 2002), safe for the common colour-vision
deficiencies. The default cycle pairs each colour with its own line style and marker, so lines stay
distinguishable in grey scale; bars and scatters should add MARKERS, hatches or direct labels too.
Every figure also needs alt text: give its code cell `mystnb: {image: {alt: ...}, figure: {caption: ...}}`.

Figures are SVG with their text kept as text (so the browser draws it sharply, and
tests/course/test_book.py can measure it). A page column is about COLUMN_INCHES wide on a desktop, so a
wider figure is shown smaller: `scale_text_to_width`, run on every new figure, sizes the figure's
fonts to its width, so that its smallest text ("x-small", ticks, legends) stays at least 9 CSS
pixels. Give text sizes by name ("small", "x-small"), never in points, so that they follow.
"""

from __future__ import annotations

from cycler import cycler

# Okabe-Ito: blue, vermillion, bluish green, orange, reddish purple, sky blue, yellow, black.
COLORS = ("#0072B2", "#D55E00", "#009E73", "#E69F00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 1)), (0, (5, 5)))
# The sequential colour map that reads in grey scale and for colour-blind readers.
SEQUENTIAL_CMAP = "viridis"
# The text size of a figure no wider than the column, in points, and the column's width in inches
# (sphinx-book-theme's content column at a 1400-pixel window, 96 CSS pixels an inch).
BASE_POINTS = 11.0
COLUMN_INCHES = 8.0


def scale_text_to_width(figure) -> None:
    """matplotlib's figure hook (rcParams["figure.hooks"]): set the font size for the text this new
    figure's axes, ticks and legends will be made with, in proportion to how far the figure is
    wider than the column (a figure shown at half size gets twice the points)."""
    import matplotlib

    width = figure.get_size_inches()[0]
    matplotlib.rcParams["font.size"] = BASE_POINTS * max(1.0, width / COLUMN_INCHES)


def use_course_style() -> None:
    """Set matplotlib's defaults for the book: the palette, a paired line-style and marker cycle,
    viridis, SVG output with real text, and fonts sized to each figure's width."""
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "figure.dpi": 110,
        "font.size": BASE_POINTS,
        "figure.hooks": ["course.plotting:scale_text_to_width"],
        "svg.fonttype": "none",  # text stays text: sharp at any zoom, and measurable in a browser
        "svg.hashsalt": "attention-by-hand",  # the same figure gives the same file
        "axes.spines.top": False,
        "axes.spines.right": False,
        "axes.prop_cycle": cycler(color=COLORS) + cycler(linestyle=LINESTYLES) + cycler(marker=MARKERS),
        "lines.markersize": 5,
        "image.cmap": SEQUENTIAL_CMAP,
    })
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is not None:  # in a notebook: figures as SVG
        from matplotlib_inline.backend_inline import set_matplotlib_formats

        set_matplotlib_formats("svg")
