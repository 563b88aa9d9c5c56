"""Statistics, figures and the HTML/Markdown report, all pure functions of experiment records.

stats     median, IQM, bootstrap CIs, paired comparisons (diverged runs counted, not crashed on)
analysis  records + presets -> results tables, comparisons, setup beside the paper's, environment
figures   the paper's Figures 2-7 from records, as each preset's FigureSpec says (plots take an ``ax``)
render    the summary table first, then the experiments in the paper's order; HTML and Markdown
sources   the one place that talks to ``gelus.experiments`` and ``gelus.data``
cli       ``gelus report`` and ``gelus reproduce``

The selection protocol itself is :mod:`gelus.experiments.selection`, shared with ``gelus run``.
"""

__all__: list[str] = []
