"""Statistics, figures and the HTML/Markdown report, all pure functions of experiment records.

stats     the aggregate over seeds (one value) and the verdicts' design: paired t-tests, Holm, TOST
analysis  records + presets -> results tables, comparisons, setup beside the paper's, environment
figures   the paper's Figures 2-7 from records, as each preset's FigureSpec says (plots take an ``ax``)
render    the summary table first, then the experiments in the paper's order; HTML and Markdown
sources   the one door to stored records, the presets and the datasets on this machine
cli       ``gelus report`` and ``gelus reproduce``

The selection protocol (:mod:`gelus.experiments.selection`) and the aggregate over seeds
(:mod:`gelus.experiments.aggregate`) are shared with ``gelus run``'s summary.
"""

__all__: list[str] = []
