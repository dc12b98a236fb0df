"""Errors with the messages of Spark's Kafka connector (kafka-error-conditions.json)."""
from __future__ import annotations

import logging

__all__ = ["KafkaDataLoss", "data_loss", "report_data_loss", "INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE"]

log = logging.getLogger("kraftd.pipeline")

_DATA_LOSS = ("Some data may have been lost because they are not available in Kafka any more; either the data "
              "was aged out by Kafka or the topic may have been deleted before all the data in the topic was "
              "processed. If you don't want your streaming query to fail on such cases, set the source option "
              "failOnDataLoss to false. Reason:")

INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE = (
    "Some data may have been lost because they are not available in Kafka any more; either the data was aged "
    "out by Kafka or the topic may have been deleted before all the data in the topic was processed. If you "
    "want your streaming query to fail on such cases, set the source option \"failOnDataLoss\" to \"true\".")


class KafkaDataLoss(RuntimeError):
    """Spark's KafkaIllegalStateException with error class KAFKA_DATA_LOSS.<subclass>."""

    def __init__(self, subclass: str, reason: str) -> None:
        super().__init__(f"[KAFKA_DATA_LOSS.{subclass}] {_DATA_LOSS} {reason} SQLSTATE: 22000")
        self.subclass = subclass
        self.reason = reason


def data_loss(subclass: str, reason: str) -> KafkaDataLoss:
    return KafkaDataLoss(subclass, reason)


def report_data_loss(fail_on_data_loss: bool, subclass: str, reason: str) -> None:
    """failOnDataLoss=true: raise; false: log a warning (Spark's reportDataLoss)."""
    if fail_on_data_loss:
        raise KafkaDataLoss(subclass, reason)
    log.warning("%s. %s", reason, INSTRUCTION_FOR_FAIL_ON_DATA_LOSS_FALSE)
