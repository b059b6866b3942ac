"""Paper Figures 2-9, one module per figure, each with ``compute(inputs, outputs, params)``
that reads its inputs and writes ``outputs["png"]`` and ``outputs["pdf"]``.

* :mod:`.fig2_allocation_rule` -- Figure 2, the allocation rule (no files).
* :mod:`.fig3_convergence_allocation` -- Figure 3, test accuracy of hasfl, fjord, uniform.
* :mod:`.fig4_heterogeneity_allocation` -- Figure 4, mean H~ and mean allocated p of hasfl over rounds.
* :mod:`.fig5_final_allocation` -- Figure 5, final per-client allocation vs capacity.
* :mod:`.fig6_frontier` -- Figure 6, final accuracy vs cost, from the method tables' per-seed files.
* :mod:`.fig7_convergence_full_model` -- Figure 7, test accuracy of hasfl vs the full-model methods.
* :mod:`.fig8_test_loss` -- Figure 8, test loss of the methods of Figure 7.
* :mod:`.fig9_estimators` -- Figure 9 (extension), estimates E0-E3 vs TV; titles from Table 8.

Shared: :mod:`.style` (theme, floors, bands, dodging), :mod:`.trajectories` (Figures 3, 7, 8),
:mod:`.reading` (reading ``inputs`` / ``params``). The captions are
:data:`hasfl.analysis.specs.FIGURES`.
"""

from hasfl.analysis.figures import style  # noqa: F401  (first: selects the Agg backend before any pyplot import)
