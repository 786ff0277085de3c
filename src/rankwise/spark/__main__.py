"""``python -m rankwise.spark eval QRELS RUN ...``: the Spark job (see
:mod:`rankwise.spark.submit`)."""

from rankwise.spark.submit import main

if __name__ == "__main__":
    main()
