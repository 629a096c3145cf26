"""The run driver under the API: plan a run (:mod:`histmig.run.plan`), run it on the local
engine (:mod:`histmig.run.local`) or Spark (:mod:`histmig.run.spark`), and word its
:class:`~histmig.run.result.Result` (:mod:`histmig.run.result`); :mod:`histmig.run.driver`
ties them together."""
