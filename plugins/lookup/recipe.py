# -*- coding: utf-8 -*-
# Copyright: aisb developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

DOCUMENTATION = r"""
name: recipe
author: aisb developers (@aisb)
short_description: The harness recipe a name stands for
description:
  - Returns the recipe of a harness name, checked - one of the collection's built-in
    recipes (C(pi), C(claude-code), C(codex), C(opencode), C(shell)) or one of the
    operator's own (O(recipes)).
  - The session resolves the same name the same way; a recipe given as a dict, a name
    that is no recipe, or an operator's recipe that replaces a built-in one fails the
    lookup, naming it.
options:
  _terms:
    description: The harness name (one).
    required: true
  recipes:
    description: The operator's own recipes, name to recipe (C(aisb_recipes), the team file's C(recipes)).
    type: dict
    default: {}
"""

EXAMPLES = r"""
- name: The recipe of the team's harness
  ansible.builtin.set_fact:
    recipe: "{{ lookup('aisb.sandbox.recipe', 'pi') }}"
"""

RETURN = r"""
_raw:
  description: The recipe, as one dict (packages, install, command, prompt, allow, env and the optional keys).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.aisb.sandbox.plugins.module_utils.harness._recipes import RecipeError, recipe_for


class LookupModule(LookupBase):

    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        if len(terms) != 1:
            raise AnsibleLookupError("aisb.sandbox.recipe takes one harness name, got %d" % len(terms))
        try:
            # The recipe as written: what Jinja and the roles read (packages, install, command, allow).
            return [recipe_for(terms[0], self.get_option("recipes")).given]
        except RecipeError as error:
            raise AnsibleLookupError(str(error))
