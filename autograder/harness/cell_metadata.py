"""nbgrader's CheckCellMetadata with its cell schema checked and compiled once, not once per cell.

nbgrader's CheckCellMetadata makes a new ``MetadataValidator`` per notebook (reading its JSON schema from disk) and
validates each cell's nbgrader metadata with ``jsonschema.validate``, which checks the schema itself against the
metaschema on every call: about 4 ms a cell, 70 ms a notebook of 8 cells over Autograde's two checks. The
validator here is nbgrader's (version checks, grade ids, cell types: `MetadataValidatorV3`), its schema validated
once and its ``jsonschema`` validator kept; a cell raises what ``jsonschema.validate`` raises (the best match).
"""

from __future__ import annotations

import traceback
from types import MappingProxyType
from typing import Any

from jsonschema import exceptions, validators
from nbconvert.exporters.exporter import ResourcesDict
from nbformat.notebooknode import NotebookNode
from nbgrader.nbgraderformat.common import BaseMetadataValidator, SchemaTooNewError, SchemaTooOldError
from nbgrader.nbgraderformat.v3 import MetadataValidatorV3, ValidationError
from nbgrader.preprocessors import CheckCellMetadata
from traitlets import Instance


class _CompiledSchema(BaseMetadataValidator):
    """nbgrader's cell check (`BaseMetadataValidator.validate_cell`) with the schema's validator made once."""

    def __init__(self) -> None:
        super().__init__()
        checked = validators.validator_for(self.schema)
        checked.check_schema(self.schema)
        self.compiled: Any = checked(self.schema)

    def validate_cell(self, cell: NotebookNode) -> None:
        if "nbgrader" not in cell.metadata:
            return
        version = cell.metadata["nbgrader"].get("schema_version", 0)
        if version < self.schema_version:
            raise SchemaTooOldError(f"Outdated schema version: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        if version > self.schema_version:
            raise SchemaTooNewError(f"Schema version is too new: {version} (expected {self.schema_version})",
                                    version, self.schema_version)
        error = exceptions.best_match(self.compiled.iter_errors(cell.metadata["nbgrader"]))
        if error is not None:
            raise error


class CompiledMetadataValidator(MetadataValidatorV3, _CompiledSchema):
    """nbgrader's current ``MetadataValidator`` (`MetadataValidatorV3`), its cell schema compiled once."""


class CompiledCheckCellMetadata(CheckCellMetadata):
    """nbgrader's CheckCellMetadata with one `CompiledMetadataValidator` for every notebook."""

    validator = Instance(CompiledMetadataValidator, args=())

    def preprocess(self, nb: NotebookNode, resources: ResourcesDict) -> tuple[NotebookNode, ResourcesDict]:
        try:
            self.validator.validate_nb(nb)
        except ValidationError as error:
            self.log.error(traceback.format_exc())
            message = "Notebook failed to validate; the nbgrader metadata may be corrupted."
            self.log.error(message)
            raise ValidationError(message) from error
        return nb, resources


COMPILED_STEPS = MappingProxyType({CheckCellMetadata: CompiledCheckCellMetadata})
