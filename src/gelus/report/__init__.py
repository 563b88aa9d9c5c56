"""Statistics, figures and the HTML/Markdown report, all pure functions of experiment records.

stats     the paper's protocol (learning rate chosen on validation), median, IQM, bootstrap CIs,
          paired comparisons
analysis  records -> results tables, comparisons, setup differences, environment
figures   the paper's Figures 2-7 from records (plot functions take an ``ax``)
render    the HTML page and its Markdown twin
sources   the one place that talks to ``gelus.experiments`` and ``gelus.data``
cli       ``gelus report`` and ``gelus reproduce``
"""

__all__: list[str] = []
